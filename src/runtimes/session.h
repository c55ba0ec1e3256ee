/* Internal access to a session's parts, for code outside session.c (alma_session_save in
 * src/onnx/save.c). */
#ifndef ALMA_SESSION_H
#define ALMA_SESSION_H

#include "graph/model.h"

/* The converted graph (after the conversion's passes); lives as long as the session. */
const alma_graph *alma__session_graph(const alma_session *s);
/* The model the session was created from. */
const alma_model *alma__session_model(const alma_session *s);

#endif
