#!/usr/bin/env python3
import json,sys,statistics,collections
for d in sys.argv[1:]:
    r=json.load(open(d+'/report.json'))
    g=collections.defaultdict(list)
    for m in r['measurements']:
        if m['concurrency']!=1: continue
        g[(m['workload'],m['system'])].append((m['per_sec'],m['latency']['p50_us'],m['latency']['p99_us']))
    print(d, r.get('machine',{}).get('load_start', ''), )
    for k,v in sorted(g.items()):
        print('  %-8s %-10s ops/s %s  p50 %s  p99 %s' % (k[0],k[1],[round(x[0]) for x in v],[x[1] for x in v],[x[2] for x in v]))
