// vlkv: the command-line front end. Subcommands live in tools/cmd_<name>.cpp.
#include <cstdio>
int main() { std::puts("vlkv: under construction"); return 0; }
