/* version.h - sheaf release version (sheafd, sheafctl, libsheaf). */
#ifndef SHEAF_VERSION
#define SHEAF_VERSION "0.1.0"
#endif
