// cases_cxx.cpp: the C++ heap-misuse programs of the misuse suite (new and
// delete); same command line and exit statuses as cases.c.
//
// The mismatched-form cases use a type with a destructor: the Itanium C++ ABI
// then stores the element count in an 8-byte cookie before the array, so
// new[] returns the allocator's block + 8 and `delete` of it frees an interior
// pointer, while `delete[]` of a `new` object frees the block - 8.  (For a
// trivially destructible type both forms pass the same pointer: nothing an
// allocator could detect, so no such case.)
#include <cstdlib>
#include <cstring>
#include <vector>

#include "misuse_common.h"

namespace {

// A type with a non-trivial destructor that touches nothing but a counter,
// so that a wrong element count read from a bogus cookie does no damage of
// its own before operator delete[] sees the bad pointer.  Far more
// destructions than the program ever made objects: delete[] is running over
// a bogus cookie and the allocator has not stopped it, so MISSED (a huge
// count would otherwise spin until the runner's timeout).
long hak_destroyed;
struct Obj {
  long v[4];
  Obj() : v{1, 2, 3, 4} {}
  __attribute__((noinline)) ~Obj() {
    if (++hak_destroyed > (1L << 24)) {
      printf("MISSED: delete[] ran %ld destructors from a bogus array cookie\n", hak_destroyed);
      exit(MISSED);
    }
  }
};

template <class T> T *launder_ptr(T *p) { return static_cast<T *>(opaque(p)); }

// What the program does after the misuse: more objects, created and deleted.
void carry_on() {
  for (int r = 0; r < 4; r++) {
    std::vector<Obj *> v;
    for (int i = 0; i < 16; i++) v.push_back(new Obj);
    for (Obj *o : v) delete o;
    delete[] new Obj[8];
  }
}

int delete_twice(size_t, size_t) {
  Obj *o = new Obj;
  delete o;
  delete launder_ptr(o);
  carry_on();
  return MISSED;
}

// With a cookie, the second delete[] would first run destructors over a
// count the allocator's free-list link overwrote: a trivially destructible
// element type has no cookie, so the allocator gets the same pointer twice.
int delete_array_twice(size_t n, size_t) {
  long *a = new long[n];
  memset(a, 1, n * sizeof *a);
  delete[] a;
  delete[] launder_ptr(a);
  carry_on();
  return MISSED;
}

int delete_buffer_twice(size_t n, size_t) {
  char *b = new char[n];
  memset(b, 1, n);
  delete[] b;
  delete[] launder_ptr(b);
  carry_on();
  return MISSED;
}

int delete_of_new_array(size_t n, size_t) {
  Obj *a = new Obj[n];
  delete launder_ptr(a);  // frees the block + 8 (the cookie's end)
  carry_on();
  return MISSED;
}

int array_delete_of_new(size_t, size_t) {
  Obj *o = new Obj;
  delete[] launder_ptr(o);  // reads a cookie at o - 8, frees o - 8
  carry_on();
  return MISSED;
}

const struct hak_case hak_cxx_cases[] = {
  {"double_free_cxx_delete", "double_free", delete_twice, 0, 0, "C++: delete of an object twice"},
  {"double_free_cxx_delete_array", "double_free", delete_array_twice, 8, 0, "C++: delete[] of a long[8] twice"},
  {"double_free_cxx_delete_array_large", "double_free", delete_buffer_twice, 2 << 20, 0, "C++: delete[] of a 2 MiB char[] twice"},
  {"double_free_cxx_delete_of_new_array", "double_free", delete_of_new_array, 8, 0, "C++: delete of new Obj[8] (array cookie)"},
  {"double_free_cxx_array_delete_of_new", "double_free", array_delete_of_new, 0, 0, "C++: delete[] of new Obj"},
  {nullptr, nullptr, nullptr, 0, 0, nullptr},
};

}  // namespace

int main(int argc, char **argv) { return hak_case_main(hak_cxx_cases, argc, argv); }
