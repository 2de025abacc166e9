#include "server/loop_inbox.h"

namespace gpusched::server {

bool LoopInbox::PostMessage(PostedMessage m, bool* wake, bool urgent) {
  std::unique_lock<std::mutex> lock(mu_);
  room_.wait(lock, [&] { return closed_ || messages_.size() < max_posted_; });
  if (closed_) return false;
  *wake = urgent && !woken_;
  woken_ = woken_ || urgent;
  messages_.push_back(std::move(m));
  return true;
}

std::string LoopInbox::PostSubmission(PostedSubmission&& s, bool* wake) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t posted = submissions_.size() + keyed_.size();
  if (closed_) return "stopping";
  if (posted >= max_posted_) {
    return "busy: " + std::to_string(max_posted_) + " submissions wait for its loop";
  }
  *wake = !woken_;
  woken_ = true;
  (s.key.empty() ? submissions_ : keyed_).push_back(std::move(s));
  return "";
}

std::string LoopInbox::PostRegistration(PostedRegistration&& r, bool* wake) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return "stopping";
  if (registrations_.size() >= max_posted_) {
    return "busy: " + std::to_string(max_posted_) + " registrations wait for its loop";
  }
  *wake = !woken_;
  woken_ = true;
  registrations_.push_back(std::move(r));
  return "";
}

std::vector<PostedSubmission> LoopInbox::TakeKeyed() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<PostedSubmission> out;
  out.swap(keyed_);
  return out;
}

LoopInbox::Taken LoopInbox::Take() {
  Taken out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.messages.swap(messages_);
    out.registrations.swap(registrations_);
    out.submissions.swap(submissions_);
    woken_ = false;
  }
  if (out.messages.size() >= max_posted_) room_.notify_all();  // a handler may wait for room
  return out;
}

LoopInbox::Closed LoopInbox::Close() {
  Closed out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    out.registrations.swap(registrations_);
    out.submissions.swap(submissions_);
    for (PostedSubmission& s : keyed_) out.submissions.push_back(std::move(s));
    keyed_.clear();
  }
  room_.notify_all();
  return out;
}

}  // namespace gpusched::server
