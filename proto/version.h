/*
 * version.h - the sheaf release version, one for the product and both sides
 * of the protocol: sheafd reports it (DaemonInfoResponse.version, --version),
 * sheafctl prints it, the Makefile names libsheaf.so.VERSION after it.
 */
#ifndef SHEAF_VERSION
#define SHEAF_VERSION "1.3.0"
#endif
