from rltuned.cli import main

main()
