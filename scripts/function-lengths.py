# Function lengths in C++ files: a brace block whose header (the text since the last ';',
# '{' or '}') has a '(' and is not a control statement or lambda, opened inside a
# namespace/class/struct body (or at file level), counted from its header's first line to
# its closing brace. Strings and comments are stripped first.
import re, sys
def strip(src):
    out=[];i=0;n=len(src)
    while i<n:
        c=src[i]
        if src.startswith('//',i):
            j=src.find('\n',i); i=n if j<0 else j; continue
        if src.startswith('/*',i):
            j=src.find('*/',i); out.append(re.sub(r'[^\n]','',src[i:j+2])); i=j+2; continue
        if src.startswith('R"',i):
            m=re.match(r'R"([^(]*)\(',src[i:]); d=m.group(1); j=src.find(')'+d+'"',i); out.append(re.sub(r'[^\n]','',src[i:j+len(d)+2])); out.append('""'); i=j+len(d)+2; continue
        if c in '"\'':
            j=i+1
            while j<n and src[j]!=c:
                j+= 2 if src[j]=='\\' else 1
            out.append(c+c); i=j+1; continue
        out.append(c); i+=1
    return ''.join(out)
limit=int(sys.argv[1]); bad=0
for f in sys.argv[2:]:
    s=strip(open(f).read())
    s='\n'.join('' if l.lstrip().startswith('#') else l for l in s.split('\n'))
    stack=[]  # (kind, start_line)
    header_start=None; header=''
    line=1
    for ch in s:
        if ch=='\n': line+=1
        if ch in ';{}':
            if ch=='{':
                h=header.strip()
                outer_ok = all(e[0]=="scope" for e in stack)
                is_fn = outer_ok and '(' in h and not re.match(r'^(if|for|while|switch|catch|do|else)\b',h) and not re.search(r'\]\s*(\(.*\))?\s*(mutable)?\s*(->.*)?$',h) and not re.match(r'^(namespace|class|struct|enum|union)\b',h) and '=' not in h.split('(')[0]
                kind='fn' if is_fn else ('scope' if (outer_ok and (re.match(r'^(namespace|class|struct|union)\b|^(template\s*<.*>\s*)?(class|struct)\b|^extern',h) or h=='')) else 'block')
                stack.append((kind, header_start or line, h))
            elif ch=='}':
                if stack:
                    k,st,h=stack.pop()
                    if k=='fn':
                        n=line-st+1
                        if n>limit: print(f'{f}:{st}: {n} lines: {h[:70]}'); bad+=1
            header=''; header_start=None
        else:
            if header_start is None and not ch.isspace(): header_start=line
            header+=ch
print(f'{bad} function(s) over {limit} lines')
