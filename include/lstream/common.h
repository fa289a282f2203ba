/*
 * What every lstream module shares in its public API: the export marker
 * and the series-key limit.
 *
 * LS_API marks a function of the public API. The libraries are built with
 * -fvisibility=hidden, so a function without it is internal: callable
 * within its folder's library (and from programs that link the static
 * liblstream.a), never exported by a shared library.
 */
#ifndef LSTREAM_COMMON_H
#define LSTREAM_COMMON_H

#if defined(__GNUC__)
#define LS_API __attribute__((visibility("default")))
#else
#define LS_API
#endif

/* The longest series key (the Kafka message key of a record), in bytes:
 * keys have 1..LS_KEY_MAX bytes. */
#define LS_KEY_MAX 255

#endif /* LSTREAM_COMMON_H */
