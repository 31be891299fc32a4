"""``python -m jupyter_superfluid serve``."""

from .serve import main

if __name__ == "__main__":
    main()
