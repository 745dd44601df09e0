from wattbench.cli.main import main

main()
