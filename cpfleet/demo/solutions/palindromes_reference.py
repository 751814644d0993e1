import sys

lines = sys.stdin.read().split()
for s in lines[1:1 + int(lines[0])]:
    print('YES' if s == s[::-1] else 'NO')
