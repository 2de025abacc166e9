#pragma once
// The dashboard's static files (web/), built into the binary by cmake/EmbedAssets.cmake so the
// server stays one file to deploy.

#include <string_view>

namespace gpusched::server {

struct Asset {
  std::string_view path;          // relative to web/, e.g. "app.js"
  std::string_view content_type;
  std::string_view body;
};

// nullptr when there is no such file.
const Asset* FindAsset(std::string_view path);

}  // namespace gpusched::server
