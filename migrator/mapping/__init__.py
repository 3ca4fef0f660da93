"""The mapping: what the YAML file says (model, loader), its defaults against a source
schema (resolve), the drafted mapping of ``init`` (scaffold) and its checks (validate).
Works on a schema object it is handed; reads nothing live and imports no other stage."""
