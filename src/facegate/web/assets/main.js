// The console's entry point: sign-in, who am I, and the hash router between views.

import { ApiError, api, credentials } from "./api.js";
import { $, $$, flashMessage, showError } from "./dom.js";
import { initAdmin, showAdmin } from "./admin.js";
import { initBatches, showBatches } from "./batches.js";
import { initJobs, showJobs } from "./jobs.js";
import { initLibrary, showLibrary } from "./library.js";
import { initLive, leaveLive, showLive } from "./live.js";
import { initSwap, showSwap } from "./swap.js";
import { initTemplates } from "./templates.js";
import { showUsage } from "./usage.js";

const VIEWS = ["signin", "swap", "jobs", "batches", "library", "live", "usage", "admin"];
// What each view needs, among /v1/me's permissions (roles and tenant:admin expanded): a
// viewer sees jobs and batches, billing usage only; a view one may not use is not shown.
const NEEDS = {
  swap: "jobs:write",
  jobs: "jobs:read",
  batches: "jobs:read",
  library: "faces:read",
  live: "streams:write",
  usage: "usage:read",
  admin: "admin",
};
const state = { me: null, live: false };

function mayView(name) {
  if (name === "live" && !state.live) return false; // the tenant's plan has no live streams
  return Boolean(state.me && state.me.permissions.includes(NEEDS[name]));
}

function firstView() {
  return VIEWS.find((view) => view !== "signin" && mayView(view)) || "usage";
}

function showView(name) {
  for (const view of VIEWS) $(`#view-${view}`).hidden = view !== name;
  for (const link of $$("#nav a")) {
    if (link.dataset.view === name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${name === "signin" ? "Sign in" : $(`#view-${name} h1`).textContent} · facegate`;
}

async function route() {
  flashMessage("");
  if (!state.me) {
    showView("signin");
    $("#api-key").focus();
    return;
  }
  const wanted = location.hash.replace(/^#\//, "") || firstView();
  const name = VIEWS.includes(wanted) && wanted !== "signin" ? wanted : firstView();
  if (!mayView(name)) {
    const fallback = firstView();
    if (fallback !== name && mayView(fallback)) location.hash = `#/${fallback}`;
    else flashMessage("This key may not use any part of the console.");
    return;
  }
  showView(name);
  if (name !== "live") leaveLive();
  try {
    if (name === "swap") await showSwap();
    else if (name === "jobs") await showJobs();
    else if (name === "batches") await showBatches(state.me);
    else if (name === "library") await showLibrary(state.me);
    else if (name === "live") await showLive();
    else if (name === "usage") await showUsage(state.me);
    else if (name === "admin") await showAdmin();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return signOut(error.message);
    flashMessage(error.message);
  }
}

async function signIn(key) {
  const me = await api("/v1/me", { key });
  credentials.set(key);
  state.me = me;
  state.live = false;
  if (me.permissions.includes(NEEDS.live)) {
    const capabilities = await api("/v1/capabilities").catch(() => null);
    state.live = Boolean(capabilities && capabilities.limits.max_concurrent_streams > 0);
  }
  $("#identity-text").textContent = `${me.tenant_id} · ${me.actor}`;
  $("#identity").hidden = false;
  $("#nav").hidden = false;
  for (const link of $$("#nav a")) link.hidden = !mayView(link.dataset.view);
}

function signOut(message = "") {
  credentials.clear();
  state.me = null;
  $("#identity").hidden = true;
  $("#nav").hidden = true;
  $("#api-key").value = "";
  showError($("#signin-error"), message);
  if (location.hash) history.replaceState(null, "", location.pathname);
  route();
}

function onSignInSubmit(event) {
  event.preventDefault();
  const key = $("#api-key").value.trim();
  const error = $("#signin-error");
  if (!key) {
    showError(error, "Enter an API key.");
    return;
  }
  showError(error, "");
  signIn(key)
    .then(() => {
      $("#api-key").value = "";
      if (!location.hash) location.hash = `#/${firstView()}`;
      else route();
    })
    .catch((failure) => {
      const message = failure.status === 401
        ? `That API key was not accepted: ${failure.message}`
        : failure.message;
      showError(error, message);
      $("#api-key").focus();
    });
}

async function start() {
  $("#signin-form").addEventListener("submit", onSignInSubmit);
  $("#sign-out").addEventListener("click", () => signOut());
  window.addEventListener("hashchange", route);
  initSwap({ onSubmitted: () => { location.hash = "#/jobs"; } });
  initJobs();
  initBatches();
  initLibrary();
  initLive();
  initTemplates();
  initAdmin();
  const saved = credentials.get();
  if (saved) {
    try {
      await signIn(saved);
    } catch (error) {
      credentials.clear();
      showError($("#signin-error"), error.message);
    }
  }
  route();
}

start();
