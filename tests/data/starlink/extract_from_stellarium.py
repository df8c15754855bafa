#!/usr/bin/env python3
"""Reproduces starlink-2022-06.tle (provenance: README.md) from the Debian package stellarium 0.22.2-1 (bookworm, amd64).

The package's /usr/bin/stellarium embeds the Satellites plugin's default catalogue (satellites.json,
"creator": "Satellites plugin version 0.13.0") as a zlib-compressed Qt resource; every entry carries
its TLE lines ("tle1", "tle2"). This script finds that resource, keeps the STARLINK entries and
selects (TLE lines copied unchanged):
  * three whole planes of the 53.05 deg / 550 km shell: every member with RAAN within 1.5 deg of 60,
    180 and 300 deg at 2022-06-17 00:00 UTC (20, 20 and 19 satellites; each plane has its slots
    20 deg apart in argument of latitude, a few extra ones 5 deg behind a slot, and a 60 deg hole);
  * one satellite of the 70 deg / 570-580 km shell (it fits none of the others: it must become a
    plane of its own).

  apt-get download stellarium          # stellarium_0.22.2-1_amd64.deb
  dpkg-deb -x stellarium_0.22.2-1_amd64.deb st
  python3 extract_from_stellarium.py st/usr/bin/stellarium > starlink-2022-06.tle

Needs python3-sgp4 and python3-numpy (RAAN / argument of latitude at the common time).
"""
import json
import math
import re
import sys
import zlib

import numpy as np
from sgp4.api import Satrec, jday


def catalogue(binary):
    data = open(binary, "rb").read()
    for m in re.finditer(rb"\x78[\x9c\xda\x01]", data):
        try:
            text = zlib.decompressobj().decompress(data[m.start():m.start() + 8_000_000])
        except zlib.error:
            continue
        if text.startswith(b"{") and b'"satellites"' in text[:200] and b"tle1" in text:
            return json.loads(text)["satellites"]
    sys.exit("no satellites.json resource found in " + binary)


def geometry(l1, l2, jd, fr):
    s = Satrec.twoline2rv(l1, l2)
    err, r, v = s.sgp4(jd, fr)
    if err:
        return None
    r, v = np.array(r), np.array(v)
    h = np.cross(r, v)
    inc = math.degrees(math.acos(h[2] / np.linalg.norm(h)))
    raan = math.degrees(math.atan2(h[0], -h[1])) % 360
    node = np.array([math.cos(math.radians(raan)), math.sin(math.radians(raan)), 0.0])
    u = math.degrees(math.atan2(np.dot(np.cross(node, r), h) / np.linalg.norm(h), np.dot(node, r))) % 360
    return inc, raan, np.linalg.norm(r) - 6378.135, u


def main():
    sats = catalogue(sys.argv[1])
    jd, fr = jday(2022, 6, 17, 0, 0, 0)
    rows = []
    for entry in sats.values():
        if not entry.get("name", "").startswith("STARLINK"):
            continue
        g = geometry(entry["tle1"], entry["tle2"], jd, fr)
        if g:
            rows.append((entry["name"], entry["tle1"], entry["tle2"]) + g)
    chosen = []
    for target in (60.0, 180.0, 300.0):
        plane = [r for r in rows if abs(r[3] - 53.05) < 0.1 and 540 < r[5] < 560
                 and abs((r[4] - target + 180) % 360 - 180) < 1.5]
        chosen += plane
    for target in (87.0,):
        other = sorted((r for r in rows if abs(r[3] - 70.0) < 0.3 and r[5] > 560
                        and abs((r[4] - target + 180) % 360 - 180) < 1.0), key=lambda r: r[0])
        chosen.append(other[0])
    chosen.sort(key=lambda r: int(r[1][2:7]))
    for r in chosen:
        print(r[0])
        print(r[1])
        print(r[2])


if __name__ == "__main__":
    main()
