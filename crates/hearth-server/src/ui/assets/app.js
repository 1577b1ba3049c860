// hearth dashboard: live redraws over one event stream, and streamed answers.
// Every action also works as a plain form post; this only makes pages live.
"use strict";
(function () {
  var csrf = (document.querySelector('meta[name="csrf"]') || {}).content || "";
  var live = document.getElementById("live");
  var kind = document.body.dataset.live;

  // Fetches a part of the page again and swaps it in.
  function redraw(box) {
    if (!box || !box.dataset.src) return;
    fetch(box.dataset.src, { credentials: "same-origin" }).then(function (r) {
      if (r.ok) return r.text();
      throw new Error("redraw failed: " + r.status);
    }).then(function (html) {
      // Unchanged parts are left alone, so focus and selection stay put.
      if (box.dataset.drawn !== html && box.innerHTML !== html) box.innerHTML = html;
      box.dataset.drawn = html;
    }).catch(function () { /* the next event tries again */ });
  }

  // Coalesces bursts of events into one redraw.
  var timer = null;
  function soon() {
    if (timer) return;
    timer = setTimeout(function () { timer = null; redraw(live); }, 250);
  }

  if (kind && live && window.EventSource) {
    var es = new EventSource("/ui/events");
    var runOnly = live.dataset.run;
    es.addEventListener("run", function (e) {
      var d = JSON.parse(e.data);
      if (!runOnly || d.run_id === runOnly) soon();
    });
    es.addEventListener("notice", function () { if (!runOnly) soon(); });
    es.addEventListener("resync", soon);
    // Whatever changed between the page's render and the stream's start
    // (or while it reconnected) was not told: draw once more on opening.
    es.addEventListener("open", soon);
    window.addEventListener("pagehide", function () { es.close(); });
  }

  // Thread page: send with the script, then follow the run's events.
  var form = document.getElementById("send");
  var answer = document.getElementById("answer");
  if (form && answer && window.EventSource) {
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var button = form.querySelector("button");
      button.disabled = true;
      answer.textContent = "";
      fetch(form.action, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf, "Content-Type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(new FormData(form)).toString()
      }).then(function (r) {
        if (!r.ok) throw new Error("sending failed: " + r.status);
        return r.json();
      }).then(function (run) {
        form.reset();
        var link = document.createElement("a");
        link.href = "/ui/runs/" + encodeURIComponent(run.run_id);
        link.textContent = run.run_id;
        link.className = "mono";
        var text = document.createElement("p");
        text.id = "answer-text";
        answer.append("Run ", link);
        answer.appendChild(text);
        var es = new EventSource("/ui/runs/" + encodeURIComponent(run.run_id) + "/events");
        es.addEventListener("text.delta", function (e) {
          text.textContent += JSON.parse(e.data).text || "";
        });
        es.addEventListener("confirmation.required", function () {
          var p = document.createElement("p");
          p.className = "notice";
          var a = document.createElement("a");
          a.href = "/ui/confirmations";
          a.textContent = "A tool call waits for confirmation.";
          p.appendChild(a);
          answer.appendChild(p);
        });
        function end(e) {
          es.close();
          answer.dataset.done = e.type;
          button.disabled = false;
          redraw(document.getElementById("history-box"));
        }
        ["run.succeeded", "run.failed", "run.cancelled"].forEach(function (t) { es.addEventListener(t, end); });
      }).catch(function (e) {
        answer.textContent = e.message;
        button.disabled = false;
      });
    });
  }
})();
