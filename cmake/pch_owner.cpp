// cmake/precompiled_headers.cmake builds this file for the precompiled headers it makes,
// which the targets of its kind reuse. It is a program only because two owners are
// programs (their objects are -fPIE, as the programs' and the suites' are).
int main() { return 0; }
