#ifndef STANDIN_CLI_ELF_H
#define STANDIN_CLI_ELF_H
#include <stddef.h>
#include <stdint.h>

/* 1: dynamically linked executable (has PT_INTERP); 0: static ELF;
 * -1: not a 64-bit ELF file (a script, say) or unreadable. */
int cli_elf_is_dynamic(const char *path);
/* The library whose hooked functions the executable at path defines
 * itself ("libprotobuf-c", "libjpeg", "libturbojpeg": linked in from its
 * static archive, so its calls never reach a shared library), and in *fn
 * the first such function found; NULL when it defines none, when its
 * symbol tables were stripped, or when it cannot be read. */
const char *cli_elf_builtin_lib(const char *path, const char **fn);
/* The function of the ELF file at path that holds a call-site frame, given
 * as its offset from the file's load base (st_frame.offset: dladdr's
 * dli_fbase): 1 with its name in name and the frame's offset into it in
 * *sym_offset; 0 when the file cannot be read, has no symbol covering it
 * (stripped), or was modified after recorded_at_s (seconds since the
 * epoch: its functions may have moved). For frames dladdr left unnamed:
 * a program's own functions, which it does not export. */
int cli_elf_name_frame(const char *path, uint64_t recorded_at_s, uint64_t offset, char *name,
                       size_t cap, uint64_t *sym_offset);
/* Drop the symbol tables read so far (a file rewritten in place). */
void cli_elf_forget(void);
#endif
