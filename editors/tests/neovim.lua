-- Neovim's built-in LSP client (0.7+, as Debian packages it) on `kvlint lsp`, headless: open a
-- template, read the diagnostics Neovim keeps, hover, apply the preferred code action, and
-- read the diagnostics again. Writes what it saw as JSON to $KVLINT_NVIM_RESULT.
local kvlint = os.getenv('KVLINT')
local template = os.getenv('KVLINT_TEMPLATE')
local result_path = os.getenv('KVLINT_NVIM_RESULT')
local seen = { diagnostics = {}, after = nil, hover = nil, actions = {} }

local function finish()
  local file = io.open(result_path, 'w')
  file:write(vim.fn.json_encode(seen))
  file:close()
  vim.cmd('qa!')
end

local ok, problem = pcall(function()
  vim.cmd('edit ' .. vim.fn.fnameescape(template))
  local buffer = vim.api.nvim_get_current_buf()
  local client_id = vim.lsp.start_client({
    name = 'kvlint',
    cmd = { kvlint, 'lsp' },
    root_dir = vim.fn.fnamemodify(template, ':h'),
  })
  assert(client_id, 'kvlint lsp did not start')
  vim.lsp.buf_attach_client(buffer, client_id)
  assert(vim.wait(20000, function() return #vim.diagnostic.get(buffer) > 0 end, 50), 'no diagnostics')
  for _, diagnostic in ipairs(vim.diagnostic.get(buffer)) do
    local lsp = (diagnostic.user_data or {}).lsp or {}
    table.insert(seen.diagnostics, {
      line = diagnostic.lnum, col = diagnostic.col, end_col = diagnostic.end_col,
      code = lsp.code or diagnostic.code, message = diagnostic.message,
      severity = diagnostic.severity,
    })
  end
  local first = vim.diagnostic.get(buffer)[1]
  -- The server counts UTF-16 units (Neovim 0.7 offers no other encoding).
  local line = vim.api.nvim_buf_get_lines(buffer, first.lnum, first.lnum + 1, false)[1]
  local _, utf16 = vim.str_utfindex(line, first.col)
  local position = { line = first.lnum, character = utf16 }
  local hovered = vim.lsp.buf_request_sync(buffer, 'textDocument/hover', {
    textDocument = { uri = vim.uri_from_bufnr(buffer) }, position = position,
  }, 10000)
  for _, answer in pairs(hovered or {}) do
    if answer.result then seen.hover = answer.result.contents.value end
  end
  local lsp_diagnostic = (first.user_data or {}).lsp
  local answered = vim.lsp.buf_request_sync(buffer, 'textDocument/codeAction', {
    textDocument = { uri = vim.uri_from_bufnr(buffer) },
    range = { start = position, ['end'] = position },
    context = { diagnostics = { lsp_diagnostic } },
  }, 10000)
  local preferred
  for _, answer in pairs(answered or {}) do
    for _, action in ipairs(answer.result or {}) do
      table.insert(seen.actions, action.title)
      if action.isPreferred then preferred = action end
    end
  end
  assert(preferred, 'no preferred code action')
  vim.lsp.util.apply_workspace_edit(preferred.edit, 'utf-16')
  assert(vim.wait(20000, function() return #vim.diagnostic.get(buffer) == 0 end, 50), 'the error stayed')
  seen.after = vim.api.nvim_buf_get_lines(buffer, 0, -1, false)
end)
if not ok then seen.error = tostring(problem) end
finish()
