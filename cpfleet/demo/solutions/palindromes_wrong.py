import sys

lines = sys.stdin.read().split()
for s in lines[1:1 + int(lines[0])]:
    h = len(s) // 2
    print('YES' if s[:h] == s[h:][::-1] else 'NO')
