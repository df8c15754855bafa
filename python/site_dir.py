"""Print the site-packages directory for an install prefix (used by cmake --install): the one the
interpreter already searches under that prefix if any (Debian: /usr/local/lib/python3.X/dist-packages
for /usr/local), else the standard <prefix>/lib/python3.X/site-packages."""
import os
import sys
import sysconfig

prefix = os.path.abspath(sys.argv[1])
for p in sys.path:
    if p.startswith(prefix.rstrip("/") + "/") and os.path.basename(p) in ("site-packages", "dist-packages"):
        print(p)
        break
else:
    print(sysconfig.get_path("purelib", "posix_prefix", {"base": prefix, "platbase": prefix}))
