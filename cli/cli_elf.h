#ifndef STANDIN_CLI_ELF_H
#define STANDIN_CLI_ELF_H
/* 1: dynamically linked executable (has PT_INTERP); 0: static ELF;
 * -1: not a 64-bit ELF file (a script, say) or unreadable. */
int cli_elf_is_dynamic(const char *path);
/* The library whose hooked functions the executable at path defines
 * itself ("libprotobuf-c", "libjpeg", "libturbojpeg": linked in from its
 * static archive, so its calls never reach a shared library), and in *fn
 * the first such function found; NULL when it defines none, when its
 * symbol tables were stripped, or when it cannot be read. */
const char *cli_elf_builtin_lib(const char *path, const char **fn);
#endif
