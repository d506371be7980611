from mcpworld.app.cli import main

main()
