from mcpworld.cli import main

main()
