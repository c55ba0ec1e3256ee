#include <stdio.h>
#include "alma/alma.h"
int main(void) { printf("alma %s\n", alma_version()); return 0; }
