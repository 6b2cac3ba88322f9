from lg_sqla.cli import main

raise SystemExit(main())
