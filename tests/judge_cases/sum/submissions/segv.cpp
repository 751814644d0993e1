int main() { volatile int *p = 0; return *p; }
