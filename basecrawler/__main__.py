from basecrawler.cli import main

raise SystemExit(main())
