/*
 * The ground floor's export marker.
 *
 * include/base/ is the library every folder may link (liblstream_base):
 * errors, the monotonic clock, the FNV-1a digest, the key->index map,
 * KEY=VALUE files, typed values and key tables, shared libraries opened on
 * first use. BASE_API exports a function
 * from liblstream_base.so to the folder libraries; liblstream.so keeps
 * these names local (only ls_* names leave it). Not a public header.
 */
#ifndef LSTREAM_BASE_API_H
#define LSTREAM_BASE_API_H

#if defined(__GNUC__)
#define BASE_API __attribute__((visibility("default")))
#else
#define BASE_API
#endif

#endif /* LSTREAM_BASE_API_H */
