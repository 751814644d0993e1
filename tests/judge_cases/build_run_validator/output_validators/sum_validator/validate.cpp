#include <cstdio>
#include <fstream>
bool same(long long a, long long b);
int main(int argc, char **argv) {
    std::ifstream ans(argv[2]);
    long long want, got;
    ans >> want;
    if (scanf("%lld", &got) != 1) return 43;
    return same(want, got) ? 42 : 43;
}
