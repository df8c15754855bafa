#!/usr/bin/env python3
"""Regenerates the OMM fixtures of tests/orbit/test_sgp4.cpp from python-sgp4's verification TLEs.

Run with the Debian python3-sgp4 package installed:  /usr/bin/python3 generate.py
Writes sats.tle (3-line TLE), sats.json (OMM JSON array, CelesTrak FORMAT=json layout) and sats.csv
(OMM CSV, CelesTrak FORMAT=csv keys, columns deliberately in another order than the JSON).
"""
import csv
import json
import os

import sgp4
from sgp4 import exporter
from sgp4.api import Satrec

# Catalog number -> object name, for a near-Earth, a drag, a 12 h resonant, a 24 h resonant and a
# low-inclination (Lyddane) case of SGP4-VER.TLE.
PICK = {5: 'VANGUARD 1', 6251: 'DELTA 1 DEB', 8195: 'MOLNIYA 2-14', 28626: 'XM-3',
        23599: 'ARIANE 42P+3 R/B'}

here = os.path.dirname(os.path.abspath(__file__))
ver = os.path.join(os.path.dirname(sgp4.__file__), 'SGP4-VER.TLE')
lines = open(ver).read().splitlines()
omms, tle = [], []
seen = set()
for i, line in enumerate(lines):
    if not line.startswith('1 '):
        continue
    l1, l2 = line[:69], lines[i + 1][:69]
    sat = Satrec.twoline2rv(l1, l2)
    if sat.satnum not in PICK or sat.satnum in seen:
        continue
    seen.add(sat.satnum)
    omms.append(exporter.export_omm(sat, PICK[sat.satnum]))
    tle += [PICK[sat.satnum], l1, l2]

with open(os.path.join(here, 'sats.tle'), 'w') as f:
    f.write('\n'.join(tle) + '\n')
with open(os.path.join(here, 'sats.json'), 'w') as f:
    json.dump(omms, f, indent=1)
    f.write('\n')
keys = list(omms[0].keys())
keys = keys[::-1]  # any column order must be accepted
with open(os.path.join(here, 'sats.csv'), 'w', newline='') as f:
    w = csv.DictWriter(f, fieldnames=keys, lineterminator='\n')
    w.writeheader()
    for o in omms:
        w.writerow(o)
