/* `runbox --version`: the version this binary was built as. */
#include <stdio.h>

#include "cli/commands.h"

#ifndef RB_VERSION
#define RB_VERSION "0.1.0-dev"
#endif

int rb_cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("runbox %s\n", RB_VERSION);
	return 0;
}
