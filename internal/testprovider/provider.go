package testprovider

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Source address, type and version of the provider: what a configuration's
// required_providers names, and where a filesystem mirror holds it
// (HOSTNAME/NAMESPACE/TYPE/…). The hostname is under .test (RFC 2606: never
// a real registry), so a CLI configuration can exclude it from direct
// installation and nothing is ever looked up on a network.
const (
	Hostname  = "kilolock.test"
	Namespace = "kilolock"
	Type      = "kltest"
	Source    = Hostname + "/" + Namespace + "/" + Type
	Version   = "0.1.0"
)

// Environment variables the provider process reads when it starts (Terraform
// starts it with its own environment, which kl passes on: neither begins
// with KL_).
const (
	// EnvSchemaVersion is the schema version of kltest_object: "0" (the
	// default, also when empty) or "1". Version 1 stores created_at as
	// RFC 3339 text instead of Unix seconds; its upgrader rewrites a
	// version 0 object on the next plan, as a provider release that raised
	// its schema version does.
	EnvSchemaVersion = "KLTEST_SCHEMA_VERSION"
	// EnvAPIDir is the fake cloud API's directory when the provider block
	// sets no api_dir.
	EnvAPIDir = "KLTEST_API_DIR"
	// EnvIgnoreStop, set to "1", makes every API call wait its whole delay
	// whatever Terraform's stop (an interrupt, SIGINT): a cloud API call
	// without a deadline, which an interrupted Terraform waits for.
	// Otherwise a call returns as soon as Terraform stops the provider
	// (terraform-plugin-framework cancels the call's context).
	EnvIgnoreStop = "KLTEST_IGNORE_STOP"
)

// MaxSchemaVersion is the highest schema version the provider knows.
const MaxSchemaVersion = 1

// SchemaVersion parses a value of EnvSchemaVersion: "" or "0" is 0, "1" is
// 1; anything else is an error naming the variable.
func SchemaVersion(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > MaxSchemaVersion {
		return 0, fmt.Errorf("%s=%q: want a schema version from 0 to %d", EnvSchemaVersion, s, MaxSchemaVersion)
	}
	return v, nil
}

// New returns the provider factory providerserver.Serve takes. The schema
// version comes from EnvSchemaVersion, read once here (at process start); a
// bad value makes every schema request fail with a diagnostic naming it.
func New(version string) func() provider.Provider {
	sv, err := SchemaVersion(os.Getenv(EnvSchemaVersion))
	return func() provider.Provider {
		return &kltest{version: version, schemaVersion: sv, schemaErr: err}
	}
}

// kltest is the provider: one resource (kltest_object) and one data source
// (kltest_object), both backed by the fake cloud API (api).
type kltest struct {
	version       string
	schemaVersion int64
	schemaErr     error
}

var _ provider.Provider = (*kltest)(nil)

// providerData is what Configure hands the resource and the data source.
type providerData struct {
	api api
}

func (p *kltest) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = Type
	resp.Version = p.version
}

func (p *kltest) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	if p.schemaErr != nil {
		resp.Diagnostics.AddError("Invalid "+EnvSchemaVersion, p.schemaErr.Error())
	}
	resp.Schema = schema.Schema{
		Description: "Kilolock's test provider: objects of a fake cloud API kept as files in a directory.",
		Attributes: map[string]schema.Attribute{
			"api_dir": schema.StringAttribute{
				Optional:    true,
				Description: "Directory where the fake cloud API keeps its objects (created if missing); default: $" + EnvAPIDir + ".",
			},
		},
	}
}

func (p *kltest) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg struct {
		APIDir types.String `tfsdk:"api_dir"`
	}
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.APIDir.IsUnknown() {
		resp.Diagnostics.AddError("Unknown api_dir", "api_dir must be known when the provider is configured: do not derive it from a resource.")
		return
	}
	dir := cfg.APIDir.ValueString()
	if dir == "" {
		dir = os.Getenv(EnvAPIDir)
	}
	if dir == "" {
		resp.Diagnostics.AddError("No API directory", "Set api_dir in the provider \"kltest\" block, or "+EnvAPIDir+".")
		return
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		resp.Diagnostics.AddError("Cannot create the API directory", err.Error())
		return
	}
	pd := &providerData{api: api{dir: dir, ignoreStop: os.Getenv(EnvIgnoreStop) == "1"}}
	resp.ResourceData = pd
	resp.DataSourceData = pd
}

func (p *kltest) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &objectResource{version: p.schemaVersion} }}
}

func (p *kltest) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{func() datasource.DataSource { return &objectDataSource{} }}
}
