from rtlgen.cli import main

raise SystemExit(main())
