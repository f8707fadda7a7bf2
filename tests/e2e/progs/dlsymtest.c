/* dlsymtest — functions looked up with dlsym on libturbojpeg's handle, as
 * ctypes does, with dlerror checked after each lookup as dlsym(3) advises:
 * under standin, a found function must still leave no error behind, a
 * missing one must still report it, and a hooked one is the shim's only
 * where the program's lookup would have found the library's (t037).
 *
 *   dlsymtest     one line per name: found or not, and dlerror() */
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
  void *h = dlopen("libturbojpeg.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlsymtest: %s\n", dlerror());
    return 1;
  }
  const char *names[] = {"tjDecompress2",    "tjDecompressHeader3", "tjGetErrorStr2",
                         "tjInitDecompress", "tjNoSuchFunction",    "jpeg_no_such_function"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    dlerror();
    void *p = dlsym(h, names[i]);
    const char *e = dlerror();
    printf("%s %s %s\n", names[i], p ? "found" : "missing", e ? "error" : "no-error");
  }
  return 0;
}
