# Include loops between the units of a directory (a unit: a .cpp and its .hpp, one node):
# an edge A -> B when A.cpp or A.hpp includes "B.hpp" (paths relative to the directory, as
# app/ includes). Prints each strongly connected set of two or more units.
#   python3 scripts/include-loops.py app
import re,subprocess,sys,os
root=sys.argv[1]
files=subprocess.check_output(['git','ls-files',root+'/*.cpp',root+'/*.hpp'],text=True).split()
unit=lambda f: os.path.splitext(f)[0]
g={}
for f in files:
    for m in re.finditer(r'^#include "([^"]+)"',open(f).read(),re.M):
        t=os.path.join(root,m.group(1))
        if t in files and unit(t)!=unit(f): g.setdefault(unit(f),set()).add(unit(t))
# Tarjan SCC
idx={};low={};st=[];on=set();out=[];c=[0]
def sc(v):
    idx[v]=low[v]=c[0];c[0]+=1;st.append(v);on.add(v)
    for w in g.get(v,()):
        if w not in idx: sc(w);low[v]=min(low[v],low[w])
        elif w in on: low[v]=min(low[v],idx[w])
    if low[v]==idx[v]:
        comp=[]
        while True:
            w=st.pop();on.discard(w);comp.append(w)
            if w==v:break
        if len(comp)>1: out.append(comp)
for v in list(g):
    if v not in idx: sc(v)
for comp in out: print('loop:',' '.join(sorted(comp)))
print(f'{len(out)} include loop(s) among {len(set(map(unit,files)))} units of {root}/')
