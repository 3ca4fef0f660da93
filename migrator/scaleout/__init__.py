"""Scale-out: migrate's chunks loaded side by side by local worker processes (`workers`), or as
tasks of a Dask cluster (`dask_tasks`, and verify's checks: `dask_verify`)."""
