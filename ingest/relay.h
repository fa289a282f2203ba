/*
 * A loopback TCP relay (internal to ingest/): gives the embedded broker a
 * fixed bootstrap port. librdkafka 2.0.2's mock brokers listen on random
 * ports and have no setting to choose them, so `lstream broker --port P`
 * listens on 127.0.0.1:P and forwards each connection to the first mock
 * broker that accepts it. Clients bootstrap through P, then connect to the
 * brokers' advertised (random-port) addresses as Kafka clients always do.
 */
#ifndef LSTREAM_INGEST_RELAY_H
#define LSTREAM_INGEST_RELAY_H

#include "lstream/error.h"

typedef struct relay_s relay_t;

/* Starts relaying 127.0.0.1:port to targets ("host:port,host:port,...", tried
 * in order for each new connection) on a thread of its own. */
ls_err_t relay_new(relay_t **out, int port, const char *targets);

/* Stops the thread and closes every connection. Accepts NULL. */
void relay_destroy(relay_t *relay);

#endif /* LSTREAM_INGEST_RELAY_H */
