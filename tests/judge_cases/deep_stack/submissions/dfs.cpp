#include <cstdio>
#include <cstring>
static int depth(int left, volatile char *sink) {
    volatile char frame[256];
    frame[left & 255] = (char)left;
    *sink += frame[(left * 7) & 255];
    return left == 0 ? 0 : 1 + depth(left - 1, frame);
}
int main() {
    int n; if (scanf("%d", &n) != 1) return 1;
    char sink = 0;
    printf("%d\n", depth(n, &sink));
    return 0;
}
