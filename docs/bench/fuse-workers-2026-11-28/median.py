import sys, collections, statistics
def num(s):
    m={'k':1e3,'M':1e6}
    if s[-1] in m: return float(s[:-1])*m[s[-1]]
    if s.endswith('us'): return float(s[:-2])
    if s.endswith('ms'): return float(s[:-2])*1000
    if s.endswith('ns'): return float(s[:-2])/1000
    return float(s)
d=collections.defaultdict(list)
for l in open(sys.argv[1]):
    f=l.split()
    if len(f)<7: continue
    d[(f[1],f[2],f[0])].append((num(f[3]),num(f[4]),num(f[5])))
labels=sorted({k[2] for k in d})
print("| workload | callers | "+" | ".join(labels)+" |")
print("|---|---|"+"---|"*len(labels))
for wl in ['DWOM','DRBM','DWOL']:
    for th in ['1','2']:
        row=[]
        for lab in labels:
            v=d.get((wl,th,lab))
            if not v: row.append('-'); continue
            ops=statistics.median(x[0] for x in v); p50=statistics.median(x[1] for x in v); p99=statistics.median(x[2] for x in v)
            spread=(max(x[0] for x in v)-min(x[0] for x in v))/ops
            row.append(f"{ops/1e3:.1f}k ({p50:.1f}/{p99:.1f} us, ±{spread*50:.0f}%)")
        print(f"| {wl} | {th} | "+" | ".join(row)+" |")
