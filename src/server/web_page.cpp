#include "server/http_server.h"

namespace k3::server {

const char* const kChatPage = R"HTML(<!doctype html>
<html><head><meta charset="utf-8"><title>k3</title></head>
<body><p>k3 server. POST /v1/chat/completions.</p></body></html>
)HTML";

}  // namespace k3::server
