// rollbench dashboard: table filters and sorting, synchronised video review, keyboard labelling.
// Served locally (no CDN); no framework.
(function () {
  "use strict";
  const dataEl = document.getElementById("page-data");
  const page = dataEl ? JSON.parse(dataEl.textContent) : {};

  // ---- sortable tables: click a header to sort by that column (numbers by data-sort when present)
  document.querySelectorAll("table.sortable").forEach((table) => {
    table.querySelectorAll("thead th").forEach((th, col) => {
      th.addEventListener("click", () => {
        const body = table.tBodies[0];
        const dir = th.dataset.dir === "asc" ? -1 : 1;
        th.dataset.dir = dir === 1 ? "asc" : "desc";
        const key = (row) => {
          const cell = row.cells[col];
          const v = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
          const num = Number(v);
          return Number.isNaN(num) || v === "" ? v.toLowerCase() : num;
        };
        const rows = Array.from(body.rows);
        rows.sort((a, b) => (key(a) > key(b) ? dir : key(a) < key(b) ? -dir : 0));
        rows.forEach((r) => body.appendChild(r));
      });
    });
  });

  // ---- runs list filters
  const filters = document.querySelectorAll("[data-filter]");
  function applyFilters() {
    document.querySelectorAll("table.runs tbody tr").forEach((row) => {
      let show = true;
      filters.forEach((f) => {
        const want = f.value.trim().toLowerCase();
        if (!want) return;
        const have = (row.dataset[f.dataset.filter] || "").toLowerCase();
        if (f.tagName === "SELECT" ? have !== want : !have.includes(want)) show = false;
      });
      row.style.display = show ? "" : "none";
    });
  }
  filters.forEach((f) => f.addEventListener("input", applyFilters));

  if (page.page !== "episode") return;

  // ---- synchronised videos: the first video is the clock; the others follow it
  const videos = Array.from(document.querySelectorAll(".videos video"));
  const lead = videos[0];
  const fps = page.fps || 10;
  const clock = document.getElementById("clock");
  const playhead = document.getElementById("playhead");
  const timeline = document.getElementById("timeline");
  const from = (v) => Number(v.dataset.from || 0);
  const duration = timeline ? Number(timeline.dataset.duration) : lead ? lead.duration : 0;
  const rel = () => (lead ? lead.currentTime - from(lead) : 0);
  // ← → step: 10% of the episode, at most 1 s, in whole frames and never less than one frame
  // (a 1 s step would be half of a 1.9 s MetaWorld episode)
  const seekStep = Math.max(1, Math.round((duration > 0 ? Math.min(1, duration / 10) : 1) * fps)) / fps;
  const seekHelp = document.getElementById("seek-help");
  if (seekHelp) seekHelp.textContent = "← → " + seekStep.toFixed(2) + " s";

  function seek(t) {
    if (!lead) return;
    const clamped = Math.max(0, Math.min(t, Math.max(0, duration - 1 / fps / 2)));
    videos.forEach((v) => { v.currentTime = from(v) + clamped; });
  }
  function follow() {
    videos.slice(1).forEach((v) => {
      if (Math.abs(v.currentTime - from(v) - rel()) > 0.08) v.currentTime = from(v) + rel();
      if (lead.paused !== v.paused) { if (lead.paused) v.pause(); else v.play().catch(() => {}); }
    });
  }
  function draw() {
    const t = rel();
    if (clock) clock.textContent = t.toFixed(2) + " s";
    if (playhead && timeline && duration > 0) {
      const x = Number(timeline.dataset.x0) + Number(timeline.dataset.w) * Math.min(1, t / duration);
      playhead.setAttribute("x1", x); playhead.setAttribute("x2", x);
    }
    if (lead) {
      const to = Number(lead.dataset.to || 0);
      if (to && lead.currentTime >= to && !lead.paused) { lead.pause(); }
      follow();
    }
    requestAnimationFrame(draw);
  }
  function toggle() {
    if (!lead) return;
    if (lead.paused) {
      if (rel() >= duration - 1 / fps) seek(0);
      videos.forEach((v) => v.play().catch(() => {}));
    } else videos.forEach((v) => v.pause());
  }
  if (lead) {
    lead.addEventListener("loadedmetadata", () => { if (lead.currentTime < from(lead)) seek(0); });
    requestAnimationFrame(draw);
  }
  const speed = document.getElementById("speed");
  if (speed) speed.addEventListener("change", () => videos.forEach((v) => { v.playbackRate = Number(speed.value); }));
  const playBtn = document.getElementById("play");
  if (playBtn) playBtn.addEventListener("click", toggle);
  if (timeline) timeline.addEventListener("click", (ev) => {
    const box = timeline.getBoundingClientRect();
    const scale = box.width / timeline.viewBox.baseVal.width;
    const x = (ev.clientX - box.left) / scale - Number(timeline.dataset.x0);
    seek(duration * x / Number(timeline.dataset.w));
  });

  // ---- labels
  const status = document.getElementById("label-status");
  const current = document.getElementById("current-label");
  const note = document.getElementById("note");
  let label = page.label;
  async function setLabel(value) {
    status.textContent = "saving…";
    try {
      const resp = await fetch(page.label_api, {
        method: "POST", headers: { "Content-Type": "application/json" }, credentials: "same-origin",
        body: JSON.stringify({ label: value, note: note ? note.value : "" }),
      });
      const body = await resp.json();
      if (!resp.ok) { status.textContent = body.error || "failed"; status.className = "bad"; return; }
      label = value;
      current.textContent = value || "none";
      const by = document.getElementById("label-by");
      if (by) by.textContent = value && body.entry ? body.entry.annotator : "";
      status.textContent = "saved"; status.className = "ok";
      document.querySelectorAll(".label-btn").forEach((b) => b.classList.toggle("active", b.dataset.label === (value || "")));
    } catch (err) { status.textContent = "failed: " + err; status.className = "bad"; }
  }
  document.querySelectorAll(".label-btn").forEach((b) => {
    b.classList.toggle("active", !!label && b.dataset.label === label);
    b.addEventListener("click", () => setLabel(b.dataset.label || null));
  });
  const saveNote = document.getElementById("save-note");
  if (saveNote) saveNote.addEventListener("click", () => { if (label) setLabel(label); else status.textContent = "choose a label first"; });

  // ---- keyboard
  document.addEventListener("keydown", (ev) => {
    if (ev.target && ["TEXTAREA", "INPUT", "SELECT"].includes(ev.target.tagName)) return;
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const k = ev.key;
    const step = 1 / fps;
    if (k === " ") { toggle(); }
    else if (k === "ArrowLeft") seek(rel() - seekStep);
    else if (k === "ArrowRight") seek(rel() + seekStep);
    else if (k === ",") { videos.forEach((v) => v.pause()); seek(rel() - step); }
    else if (k === ".") { videos.forEach((v) => v.pause()); seek(rel() + step); }
    else if (k === "[") seek(rel() - 10);
    else if (k === "]") seek(rel() + 10);
    else if (k >= "1" && k <= "9") { const lab = page.labels[Number(k) - 1]; if (lab) setLabel(lab); else return; }
    else if (k === "0") setLabel(null);
    else if (k === "n") { if (page.next_unlabeled) window.location.href = page.next_unlabeled; else status.textContent = "every episode of this run is labelled"; }
    else return;
    ev.preventDefault();
  });
})();
