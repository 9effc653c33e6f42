/* What the registry learns of a plugin file without running any of its
 * code: the names its ".weft_plugins" section declares (WEFT_PLUGIN_NAMES,
 * weft/plugin.h), read from the ELF section table, and whether the file
 * and its directory are safe to load from. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/registry_impl.h"

/* Sections larger than this are not a names list. */
#define NAMES_MAX (64u << 10)
#define NAMES_MAGIC "weft-plugins 1\n"

static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t k = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

int weft_plugin_read_names(const char *path, char **text)
{
	Elf64_Ehdr eh;
	Elf64_Shdr *sh = NULL, str;
	char *names = NULL, *out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), rc = -1;
	struct stat st;

	*text = NULL;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || read_at(fd, &eh, sizeof(eh), 0) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
	    eh.e_shstrndx >= eh.e_shnum || eh.e_shoff >= (uint64_t)st.st_size ||
	    (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > (uint64_t)st.st_size - eh.e_shoff)
		goto out;
	sh = malloc((size_t)eh.e_shnum * sizeof(*sh));
	if (!sh || read_at(fd, sh, (size_t)eh.e_shnum * sizeof(*sh), eh.e_shoff))
		goto out;
	str = sh[eh.e_shstrndx];
	if (str.sh_size == 0 || str.sh_size > NAMES_MAX || str.sh_offset > (uint64_t)st.st_size ||
	    str.sh_size > (uint64_t)st.st_size - str.sh_offset)
		goto out;
	names = malloc(str.sh_size + 1);
	if (!names || read_at(fd, names, str.sh_size, str.sh_offset))
		goto out;
	names[str.sh_size] = 0;
	rc = 0;
	for (size_t i = 0; i < eh.e_shnum; i++) {
		const Elf64_Shdr *s = &sh[i];

		if (s->sh_name >= str.sh_size || strcmp(names + s->sh_name, ".weft_plugins"))
			continue;
		rc = -1;
		if (s->sh_type == SHT_NOBITS || s->sh_size > NAMES_MAX ||
		    s->sh_offset > (uint64_t)st.st_size ||
		    s->sh_size > (uint64_t)st.st_size - s->sh_offset)
			break;
		out = malloc(s->sh_size + 1);
		if (!out || read_at(fd, out, s->sh_size, s->sh_offset))
			break;
		out[s->sh_size] = 0;
		/* the section may hold several lists (one per object file),
		 * each NUL-terminated: join them with spaces */
		for (size_t k = 0; k < s->sh_size; k++)
			if (!out[k])
				out[k] = ' ';
		*text = out;
		out = NULL;
		rc = 1;
		break;
	}
out:
	free(out);
	free(names);
	free(sh);
	close(fd);
	return rc;
}

int weft_plugin_next_name(const char **cursor, weft_plugin_kind *kind, char *name, size_t len)
{
	static const weft_plugin_kind kinds[] = { WEFT_PLUGIN_COMM, WEFT_PLUGIN_STRATEGY,
						  WEFT_PLUGIN_OPTIM, WEFT_PLUGIN_CALLBACK,
						  WEFT_PLUGIN_MODEL };
	const char *p = *cursor, *colon, *end;
	size_t kl, nl;

	for (;;) {
		p += strspn(p, " \t\n");
		if (!strncmp(p, NAMES_MAGIC, strlen(NAMES_MAGIC))) {
			p += strlen(NAMES_MAGIC);
			continue;
		}
		break;
	}
	if (!*p) {
		*cursor = p;
		return 0;
	}
	end = p + strcspn(p, " \t\n");
	*cursor = end;
	colon = memchr(p, ':', (size_t)(end - p));
	if (!colon)
		return -1;
	kl = (size_t)(colon - p);
	nl = (size_t)(end - colon - 1);
	if (nl == 0 || nl >= len)
		return -1;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const char *kn = weft_plugin_kind_name(kinds[i]);

		if (strlen(kn) == kl && !strncmp(kn, p, kl)) {
			*kind = kinds[i];
			memcpy(name, colon + 1, nl);
			name[nl] = 0;
			return 1;
		}
	}
	return -1;
}

int weft_plugin_place_unsafe(const char *path, int is_dir, char *why, size_t len)
{
	struct stat st;
	uid_t me = geteuid();

	if (stat(path, &st) != 0)
		return 0; /* what does not exist is reported by whoever opens it */
	if (st.st_mode & S_IWOTH) {
		snprintf(why, len, "%s %s is writable by every user (mode %04o), so anyone could "
			 "place code there that weft would run; refused (run `chmod o-w %s`, or "
			 "move the plugins to a directory only you can write)",
			 is_dir ? "plugin directory" : "plugin file", path,
			 (unsigned)(st.st_mode & 07777), path);
		return 1;
	}
	if (st.st_uid != 0 && st.st_uid != me) {
		snprintf(why, len, "%s %s belongs to user id %u, neither you (%u) nor root; refused "
			 "(weft loads plugins only from files and directories owned by you or "
			 "root)", is_dir ? "plugin directory" : "plugin file", path,
			 (unsigned)st.st_uid, (unsigned)me);
		return 1;
	}
	return 0;
}
