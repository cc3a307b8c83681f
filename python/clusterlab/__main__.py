from clusterlab.cli import main

main()
