/* Image recipes: what `runbox image build` makes with mmdebstrap (images/build.h), read from an
 * operator's JSON file and validated strictly. */
#ifndef RB_IMAGE_RECIPE_H
#define RB_IMAGE_RECIPE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

#define RB_RECIPE_MAX_PACKAGES 512
#define RB_RECIPE_MAX_MIRRORS  8
#define RB_RECIPE_MAX_FILES    64
#define RB_RECIPE_MAX_COMPS    8
#define RB_RECIPE_MAX_COMMANDS 64

struct rb_recipe_file {
	char *path;    /* absolute, clean, inside the image */
	char *content; /* written as is */
	mode_t mode;   /* permission bits, 0644 by default */
};

struct rb_recipe {
	char suite[64];   /* bookworm */
	char variant[16]; /* mmdebstrap's: extract, custom, essential, apt, required, minbase, ... */
	char arch[16];    /* empty: the host's */
	char *mirrors[RB_RECIPE_MAX_MIRRORS];
	unsigned n_mirrors;
	char *components[RB_RECIPE_MAX_COMPS];
	unsigned n_components;
	char *packages[RB_RECIPE_MAX_PACKAGES];
	unsigned n_packages;
	struct rb_recipe_file files[RB_RECIPE_MAX_FILES];
	unsigned n_files;
	/* Shell commands (/bin/sh -c), run in order after the files, each in a runbox sandbox whose
	 * root is the new tree itself, writable (never on the host) */
	char *commands[RB_RECIPE_MAX_COMMANDS];
	unsigned n_commands;
	bool commands_gateway;     /* "network": "gateway": the commands reach the gateway's proxy */
	int64_t source_date_epoch; /* SOURCE_DATE_EPOCH for the build: the same packages, the same tree */
	char hash[65];             /* sha256 of the recipe's canonical JSON */
};

/* Parses text (from origin, for messages). Unknown keys and wrong types are named by path. */
int rb_recipe_parse(const char *text, const char *origin, struct rb_recipe *out, struct rb_error *err);
int rb_recipe_load(const char *path, struct rb_recipe *out, struct rb_error *err);
void rb_recipe_free(struct rb_recipe *r);

#endif
