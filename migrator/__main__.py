from migrator.cli import main

main()
