from eq_tui.cli.main import main

raise SystemExit(main())
