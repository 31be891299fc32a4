"""``python -m jupyter_superfluid serve``."""

from jupyter_superfluid.serve import main

if __name__ == "__main__":
    main()
