#ifndef STANDIN_CLI_ELF_H
#define STANDIN_CLI_ELF_H
/* 1: dynamically linked executable (has PT_INTERP); 0: static ELF;
 * -1: not a 64-bit ELF file (a script, say) or unreadable. */
int cli_elf_is_dynamic(const char *path);
#endif
