from bisect import bisect_right

n = int(input())
tails: list[int] = []
for x in map(int, input().split()):
    k = bisect_right(tails, x)
    if k == len(tails):
        tails.append(x)
    else:
        tails[k] = x
print(len(tails))
