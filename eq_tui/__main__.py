from eq_tui.cli import main

raise SystemExit(main())
